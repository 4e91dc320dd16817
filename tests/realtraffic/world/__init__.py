"""The worlds the contenders are measured in: real processes on 127.0.0.0/8."""
