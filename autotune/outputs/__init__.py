"""What a user commits or deploys: the `.env` block, the profile, the compose override, drift checks."""
