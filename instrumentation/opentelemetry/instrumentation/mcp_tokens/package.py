_instruments = ("mcp >= 1.24, < 3",)
