"""Static connector: prompts and resources declared in the config file."""
