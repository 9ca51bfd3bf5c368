"""Provider tokens at rest: Fernet encryption, key rotation, masking and redaction; and the same
encryption for other data kept at rest for a while (the gateway's idempotent answers).

The only module that sees a token in clear besides the adapter that sends it. Keys come
from `FIELD_ENCRYPTION_KEY` (and `FIELD_ENCRYPTION_KEY_PREVIOUS` while rotating); any
string works as a key because it is stretched into a Fernet key with SHA-256.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Iterable

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

REDACTED = "[redacted]"
# Things that look like credentials even when we do not know the exact value: bearer
# headers and long opaque tokens (Cloudflare API tokens are 40 URL-safe characters).
_CREDENTIAL_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b(sk-[A-Za-z0-9_-]{8,})"),
)


class TokenDecryptError(Exception):
    """The stored ciphertext does not decrypt with the current or previous key."""


def _fernet_for(key: str) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(key.encode()).digest()))


def _cipher() -> MultiFernet:
    return _cipher_for((settings.FIELD_ENCRYPTION_KEY, *settings.FIELD_ENCRYPTION_KEY_PREVIOUS))


@functools.cache
def _cipher_for(keys: tuple[str, ...]) -> MultiFernet:
    """Made once per set of keys: every gateway request decrypts its connection's token, and
    stretching and loading the keys each time cost as much as the decryption (issue 24)."""
    return MultiFernet([_fernet_for(key) for key in keys if key])


def token_encrypt(token: str) -> str:
    return _cipher().encrypt(token.encode()).decode()


def token_decrypt(ciphertext: str) -> str:
    try:
        return _cipher().decrypt(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise TokenDecryptError(
            "A stored provider token cannot be decrypted; was FIELD_ENCRYPTION_KEY changed "
            "without setting FIELD_ENCRYPTION_KEY_PREVIOUS?"
        ) from exc


def token_rotate(ciphertext: str) -> str:
    """Re-encrypt under the current key (after a key rotation)."""
    return _cipher().rotate(ciphertext.encode()).decode()


def data_encrypt(data: bytes) -> bytes:
    """Fernet ciphertext of `data` (authenticated: a changed byte fails `data_decrypt`)."""
    return _cipher().encrypt(data)


def data_decrypt(ciphertext: bytes) -> bytes:
    """Raises `cryptography.fernet.InvalidToken` when no current or previous key opens it."""
    return _cipher().decrypt(ciphertext)


def token_last4(token: str) -> str:
    """At most the last four characters, and none of a token too short to hide the rest."""
    return token[-4:] if len(token) >= 12 else ""


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret and anything credential-shaped replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _CREDENTIAL_PATTERNS[0].sub(rf"\1{REDACTED}", text)
    return _CREDENTIAL_PATTERNS[1].sub(REDACTED, text)
