"""The redactor: each kind found where it is, and left alone where it only looks like one."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from playground.lib.redaction import PLACEHOLDER, Redaction, card_number, iban_valid, luhn_valid

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


def redacted(text: str, *, region: str = "US") -> tuple[str, dict[str, int]]:
    redaction = Redaction(phone_region=region)
    return redaction.text(text), dict(redaction.counts)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("write to ana.lima+billing@example.co.uk today", "email"),
        ("call +44 20 7946 0958 after six", "phone"),
        ("call (415) 555-2671 after six", "phone"),
        ("call 415.555.2671 after six", "phone"),
        ("call 4155552671 after six", "phone"),  # digits alone
        ("ruf an: +49 30 12345678", "phone"),
        ("card 4111 1111 1111 1111 exp 12/28", "card"),
        ("card 4111-1111-1111-1111", "card"),
        ("amex 378282246310005", "card"),
        ("pay to DE89 3704 0044 0532 0130 00 please", "iban"),
        ("pay to GB82WEST12345698765432.", "iban"),
        ("server 192.168.10.24 is down", "ip"),
        ("server 2001:db8::8a2e:370:7334 is down", "ip"),
        ("link-local fe80::1ff:fe23:4567:890a", "ip"),
        ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345", "secret"),
        ("our key pgk_Zx81AbCdEfGhIjKlMnOpQrStUv", "secret"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "secret"),
        ("token ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ here", "secret"),
        ("Authorization: Bearer abcdef0123456789abcdef", "secret"),
        ('{"password": "hunter2hunter2"}', "secret"),
        ("stripe sk_live_abcdefghijklmnop1234", "secret"),
        ("slack xoxb-123456789012-abcdefABCDEF", "secret"),
        ("hook https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX", "secret"),
        ("google AIzaSyA1234567890abcdefghijklmnopqrstuv", "secret"),
        ("gitlab glpat-abcdefghijklmnopqrst", "secret"),
        ("hub hf_abcdefghijklmnopqrstuvwxyz012345", "secret"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret"),
        (f"jwt {JWT}", "secret"),
    ],
)
def test_each_kind_is_replaced_by_a_typed_placeholder(text: str, kind: str) -> None:
    out, counts = redacted(text)

    assert counts == {kind: 1}
    assert PLACEHOLDER.search(out) is not None and f"<{kind}:" in out


def test_a_private_key_block_is_replaced_whole_even_unterminated() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----"

    out, counts = redacted(f"key:\n{block}\nthanks")
    cut, cut_counts = redacted("key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA")

    assert counts == {"secret": 1} and "MIIE" not in out and out.endswith("\nthanks")
    assert cut_counts == {"secret": 1} and "b3Bl" not in cut


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 fails Luhn",  # 16 digits, Luhn-invalid: not a card
        "order 1234567812345678 shipped",  # Luhn-invalid too
        "ids 1700000000000 and 1234567890",  # a timestamp, a run of digits no phone plan has
        "in 2024 17 people paid 250 each on 2026-01-15 at 10:30:00",
        "total $1,249.50 or 1249.50 EUR, version 1.2.3",
        "std::vector<int> v; x[1::2]; ::1 is loopback",
        "IBAN-like DE00 3704 0044 0532 0130 00 fails its checksum",
        "no TLD: ana@localhost, a decorator @property",
        "tokens: 512 and max_tokens=1024",  # a name that sounds secret with a short value
        "sk-short and pgk_short",
    ],
)
def test_what_only_looks_like_an_entity_is_left_alone(text: str) -> None:
    assert redacted(text) == (text, {})


def test_the_same_value_reads_the_same_within_a_record_and_differently_in_the_next() -> None:
    first = Redaction()
    body = first.value(
        {
            "messages": [
                {"role": "user", "content": "I am ana@example.com"},
                {"content": "ana@example.com, hi"},
            ]
        }
    )
    again = Redaction().text("I am ana@example.com")

    one, two = (PLACEHOLDER.search(m["content"]).group() for m in body["messages"])  # type: ignore[union-attr]
    assert one == two and first.counts["email"] == 2
    assert again != body["messages"][0]["content"]  # another record, another salt


def test_a_json_value_keeps_its_shape_keys_and_numbers() -> None:
    value = {
        "model": "m",
        "temperature": 0.5,
        "n": 2,
        "messages": [{"role": "user", "content": "x@example.org"}],
    }

    out = Redaction().value(value)

    assert out["model"] == "m" and out["temperature"] == 0.5 and out["n"] == 2
    assert out["messages"][0]["role"] == "user" and out["messages"][0]["content"].startswith("<email:")


def test_overlapping_finds_keep_the_stronger_kind() -> None:
    _, counts = redacted("key sk-proj-4111111111111111aaaaaaaaaaaaaaaa and 10.0.0.1")

    assert counts == {"secret": 1, "ip": 1}


def test_a_national_number_is_read_in_the_configured_region() -> None:
    german = "ruf 030 12345678 an"

    assert redacted(german, region="DE")[1] == {"phone": 1}
    assert redacted(german, region="US")[1] == {}


def test_the_checksums() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert card_number("5555 5555 5555 4444") and not card_number("1234 5678 9012 3456")
    assert iban_valid("DE89 3704 0044 0532 0130 00") and not iban_valid("DE89 3704 0044 0532 0130 01")


def test_a_large_body_is_redacted_in_bounded_time() -> None:
    """Half a megabyte of figures and words (the gateway's cap is larger, the shape is the
    worst): linear, well under a second even on a busy machine."""
    import time

    text = " ".join(f"{i} 2024-01-15 {i * 7919} word" for i in range(40_000))[:512_000]
    started = time.perf_counter()
    Redaction().text(text)
    assert time.perf_counter() - started < 5


def test_a_card_or_an_iban_followed_by_a_figure_is_cut_at_its_last_valid_group() -> None:
    text = "card 4111 1111 1111 1111 2028 and DE89 3704 0044 0532 0130 00 42"
    redaction = Redaction()
    spans = [text[start:end] for start, end, _ in redaction._found(text)]

    assert spans == ["4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00"]


def test_the_quick_phone_check_decides_as_phonenumbers_does() -> None:
    """`phone_quick` skips `phonenumbers.parse`: wherever it answers, the answer is the one
    parse and `is_valid_number` give, on every region's example numbers written internationally
    and nationally, with digits changed, and on runs of digits, read in several regions."""
    import random

    import phonenumbers

    from playground.lib.redaction.phones import phone_parsed_valid as parsed_valid
    from playground.lib.redaction.phones import phone_quick

    rng = random.Random(37)
    kinds = (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE)
    formats = (phonenumbers.PhoneNumberFormat.INTERNATIONAL, phonenumbers.PhoneNumberFormat.NATIONAL)
    candidates = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in kinds:
            example = phonenumbers.example_number_for_type(region, kind)
            if example is not None:
                for form in formats:
                    written = phonenumbers.format_number(example, form)
                    candidates.append(written)
                    candidates.append(
                        "".join(
                            rng.choice("0123456789") if c.isdigit() and rng.random() < 0.3 else c
                            for c in written
                        )
                    )
    for _ in range(1500):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(7, 14)))
        candidates += ["+" + digits, digits, f"({digits[:3]}) {digits[3:6]}-{digits[6:]}"]
    answered = valid = 0
    for candidate in candidates:
        for region in ("US", "GB", "DE", "IN", "IT", "BR"):
            quick = phone_quick(candidate, region)
            if quick is not None:
                assert quick == parsed_valid(candidate, region), (candidate, region)
                answered += 1
                valid += quick
    assert answered > len(candidates) * 3 and valid > 1000  # it answers most of them, many valid


def test_the_quick_ipv4_check_decides_as_ipaddress_does() -> None:
    """`ipv4_valid` skips `ipaddress`: on every shape `_IPV4` matches (one to three digits,
    leading zeros, over 255, other scripts' digits) its answer is `ipaddress`'s."""
    import ipaddress
    import random

    from playground.lib.redaction.checks import ipv4_valid

    rng = random.Random(37)
    octets = ["0", "00", "01", "007", "9", "10", "99", "199", "255", "256", "300", "999", "\u0661", "1\u0662"]
    candidates = [".".join(rng.choice(octets) for _ in range(4)) for _ in range(3000)]
    candidates += [".".join(str(rng.randrange(300)) for _ in range(4)) for _ in range(3000)]
    assert_decides_as(ipv4_valid, ipaddress.ip_address, candidates)


def test_the_quick_ipv6_check_decides_as_ipaddress_does() -> None:
    """`ipv6_valid` skips `ipaddress`: on what the finder reads as a candidate (hex groups and
    colons, maybe a dotted IPv4 tail, other scripts' digits) its answer is `ipaddress`'s."""
    import ipaddress
    import random

    from playground.lib.redaction.checks import ipv6_valid

    rng = random.Random(37)
    groups = ["", "", "0", "1", "db8", "2001", "fe80", "ffff", "12345", "0000", "abcd", "ABCD", "g"]
    tails = ["", "", "", "1.2.3.4", "192.168.0.1", "256.1.1.1", "01.2.3.4", "1.2.3", "ab1.2.3.4"]
    tails.append("\u0661.2.3.4")  # an Arabic-Indic one
    candidates = []
    for _ in range(6000):
        parts = [rng.choice(groups) for _ in range(rng.randrange(1, 11))]
        tail = rng.choice(tails)
        candidates.append(":".join(parts) + (":" + tail if tail else ""))
    for _ in range(3000):  # addresses written as `ipaddress` writes them, some with a group changed
        hextets = [rng.choice((0, 0, rng.randrange(65536))) for _ in range(8)]
        written = str(ipaddress.IPv6Address(sum(h << (16 * i) for i, h in enumerate(hextets))))
        candidates += [written, written.replace(":", rng.choice(("::", ":0:", ":12345:")), 1)]
    candidates += ["::", "::1", "1::", ":1::", "1::2:", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::1.2.3.4"]
    assert_decides_as(ipv6_valid, ipaddress.IPv6Address, candidates)


def assert_decides_as(
    quick: Callable[[str], bool], parse: Callable[[str], object], candidates: list[str]
) -> None:
    """`quick` says valid wherever `parse` raises no ValueError, and both answers come many times."""
    valid = 0
    for candidate in candidates:
        try:
            parse(candidate)
        except ValueError:
            parsed = False
        else:
            parsed = True
        assert quick(candidate) == parsed, candidate
        valid += parsed
    assert 500 < valid < len(candidates) - 500


def test_a_run_read_whole_as_a_card_is_read_again_when_a_secret_takes_part_of_it() -> None:
    """A run that one card covers is not read for phone numbers (they would lose to it), unless
    the card is not kept: here a secret's value takes its first groups, and the phone number in
    the rest is found as if the shortcut did not exist."""
    card_run = "4111-1111-8 415 555 2671"  # 19 digits, Luhn-valid: a card alone

    assert redacted(card_run)[1] == {"card": 1}
    assert redacted(f"token={card_run}")[1] == {"secret": 1, "phone": 1}
