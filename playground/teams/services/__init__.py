"""Writes of the team pages, one module per sub-domain; callers import from the module that holds the name.

Every function takes the acting membership (already scoped to the team by the view, so
another team's object is never found) and checks the role rule itself (`role_checks`), so a
service is safe whoever calls it. Every change is written to the team's audit log (`audit`)
in the same transaction. Owners do everything; admins manage connections, budgets and
members but never an owner (nor make one); the last owner can neither leave nor be demoted.

- `members`, `invitations`: who is in the team and with what role; invitation links.
- `connections`: the team's provider connections.
- `prices`: price overrides and global price cards.
- `budgets`: the team's and each member's monthly limits, and unpriced requests.
- `api_keys`: the team's API keys for the gateway (created, changed, revoked); also what
  `manage.py gateway_key_create` calls.
"""
