"""The model's facts, read before and beside the engine: its files (config.json, the
tokenizer's, from a folder or the hub), its shape's memory arithmetic, the tokenizer and
stop ids the reply path needs, the system prompts, and the offline demo model's writer."""
