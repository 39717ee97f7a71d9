"""The agent family figures: one module per figure."""
