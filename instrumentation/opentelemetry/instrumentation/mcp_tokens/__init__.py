"""OpenTelemetry instrumentation for token economics of the Model Context Protocol."""
