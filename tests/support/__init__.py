"""What several test modules share: hosts, loopback servers, the CLI as a function."""
