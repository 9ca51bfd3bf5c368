"""What the usage records tell beyond their sum: cache breaks, the context-window runway, sessions.

They read records (`usage.records`, `usage.models`) and never write them; nothing on the
metered call's path imports them but `sessions.session_key`, a pure function of a record's
fields (the redaction salt's scope, `usage.redaction_salt`).
"""

from __future__ import annotations
