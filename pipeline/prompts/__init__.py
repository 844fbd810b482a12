"""The prompt files (package data; loaded by pipeline.prompts). No code lives here."""
