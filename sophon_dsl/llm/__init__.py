"""The LLM front end: providers, the execution loop, streamed dispatch (issue 5)."""
