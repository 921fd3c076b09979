"""Reading and writing the three plan forms: the text DSL, JSON and YAML."""
