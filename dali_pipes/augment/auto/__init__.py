"""The operations RandAugment, TrivialAugment and AutoAugment share, and their realisations."""
