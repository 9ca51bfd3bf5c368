"""Automatic affinity: what a client that sends no affinity key gets cached.

Against a running app (`make run`: the gateway in front of the embedded engine, whose replicas
each keep their own prefix cache), four kinds of client hold the same multi-turn conversations
through the gateway: one that sends `x-session-affinity` itself, one that sends only
`x-playground-session` with a plain key (the request lands on any replica), one that sends
only `x-playground-session` with a key that follows a routing policy with `auto_affinity` (the
gateway adds a key derived from the session), and one that sends neither header with that key
(the gateway infers the session from the messages, `routing.session_infer`). The cached share
is cached / prompt tokens over every turn after a session's first. Target (issue 35): the
automatic ones within 5 points of the explicit one.

    .venv/bin/python benchmarks/auto_affinity.py --url http://127.0.0.1:8000 \\
        --plain-key pgk_... --routed-key pgk_... [--sessions 8] [--turns 5]

Make the keys with `manage.py gateway_key_create --team T --name plain` and `... --policy`
after putting a policy with `"auto_affinity": true` in force (`manage.py routing_policy`).
"""

from __future__ import annotations

import argparse
import uuid

import httpx

MODEL = "@local/smollm2-135m-instruct"
SYSTEM = (
    "You are the support assistant of a shop that sells garden tools. Answer in one short sentence. "
    + " ".join(f"Policy {n}: orders over {n * 10} dollars ship free within {n + 2} days." for n in range(12))
)


def conversation(client: httpx.Client, url: str, key: str, kind: str, turns: int) -> tuple[int, int]:
    """One session of `turns` turns; returns (prompt, cached) tokens of the turns after the first."""
    session = f"{kind}-{uuid.uuid4().hex[:8]}"
    headers = {"authorization": f"Bearer {key}"}
    if kind != "inferred":
        headers["x-playground-session"] = session
    if kind == "explicit":
        headers["x-session-affinity"] = session
    messages = [{"role": "system", "content": SYSTEM}]
    prompt = cached = 0
    for turn in range(turns):
        # Each conversation its own (a ticket number): an inferred session is found by its messages.
        question = f"Question {turn} (ticket {session[-8:]}): do rakes ship free to zone {turn}?"
        messages.append({"role": "user", "content": question})
        body = {"model": MODEL, "messages": messages, "max_tokens": 12, "temperature": 0}
        answer = client.post(f"{url}/v1/chat/completions", json=body, headers=headers)
        answer.raise_for_status()
        data = answer.json()
        usage = data["usage"]
        if turn:
            prompt += usage["prompt_tokens"]
            cached += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        messages.append({"role": "assistant", "content": data["choices"][0]["message"]["content"] or ""})
    return prompt, cached


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--plain-key", required=True)
    parser.add_argument("--routed-key", required=True)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    totals = {kind: [0, 0] for kind in ("explicit", "session only", "automatic", "inferred")}
    keys = {
        "explicit": args.plain_key,
        "session only": args.plain_key,
        "automatic": args.routed_key,
        "inferred": args.routed_key,
    }
    with httpx.Client(timeout=120) as client:
        for _ in range(args.sessions):  # the kinds take turns: the same machine for each
            for kind in totals:
                prompt, cached = conversation(client, args.url, keys[kind], kind.split()[0], args.turns)
                totals[kind][0] += prompt
                totals[kind][1] += cached
    shares = {kind: 100 * cached / prompt if prompt else 0.0 for kind, (prompt, cached) in totals.items()}
    for kind, share in shares.items():
        print(f"{kind:>13}: {share:5.1f} % of {totals[kind][0]:,} prompt tokens cached after the first turn")
    gap = shares["explicit"] - min(shares["automatic"], shares["inferred"])
    verdict = "PASS" if gap <= 5 else "MISSED"
    print(
        f"automatic affinity: {shares['automatic']:.1f} % with a named session, {shares['inferred']:.1f} % "
        f"with an inferred one, vs {shares['explicit']:.1f} % with the header, "
        f"{shares['session only']:.1f} % without (target: within 5 points) {verdict}"
    )


if __name__ == "__main__":
    main()
