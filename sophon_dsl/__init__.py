"""sophon-dsl: a declarative plan language and interpreter for LLM agents."""
