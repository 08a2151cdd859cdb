"""Publishing: variant digests, cards on the Hub, uploads."""
