"""Configuration: Hydra composition, the structured schemas, and the specs made from them."""
