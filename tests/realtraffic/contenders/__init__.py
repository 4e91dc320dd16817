"""The contenders: each chooses a proxy or a key for every attempt."""
