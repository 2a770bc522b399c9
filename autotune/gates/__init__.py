"""The gates a configuration must pass: parity with fp32, the recording's self-check, int8's judge and speed
check, the pre-checks, and the result-quality gate on how much is scored."""
