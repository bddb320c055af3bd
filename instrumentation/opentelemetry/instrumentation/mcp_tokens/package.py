_instruments = ("mcp >= 1.23, < 3",)
