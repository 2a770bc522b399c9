"""Credentials never reach a terminal, a log or a file autotune writes: URLs are shown without their userinfo.

`http://alice:S3cret@host/` is a common way to hand a password to a client, and every message that names
the URL would otherwise print it. One function, used where a URL is shown and once more over every error line.
"""

from __future__ import annotations

import re

# scheme://userinfo@ : the userinfo runs to the last "@" before the path, so a raw "@" inside a password
# (`http://a:p@ss@host`) is hidden whole
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s]*)@")
HIDDEN = "***"


def redact(text: str) -> str:
    """`text` with the userinfo of every URL in it replaced by `***` (the scheme and host stay readable)."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{HIDDEN}@", text)


def has_userinfo(url: str) -> bool:
    return _USERINFO.search(url) is not None
