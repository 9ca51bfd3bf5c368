"""Team pages, one module per sub-domain; `urls.py` imports each module.

Thin views over `teams.services` (writes) and `teams.selectors` (reads). Every page is
`/teams/<team_id>/…`: `page.team_view` finds the user's membership of that team (none: 404,
so another team's pages and objects do not exist for you) and checks the role the method
needs: every member reads, owners and admins change things. Services check the finer rules
(admins never touch owners; the last owner stays). Invitation links (`joining`) are the
exception: open to visitors without an account.
"""
