"""From real environments to data: collection and volatility detection."""
