"""Single sign-on with OpenID Connect (docs/sso.md), through mozilla-django-oidc.

`discovery` finds the provider's endpoints, `backend` checks the ID token and the claims and
matches or creates the user, `views` start the sign-in and take the provider's answer,
`forms` is the password form that refuses accounts which sign in through the provider only.
Everything here is off unless OIDC_ISSUER and OIDC_CLIENT_ID are set.
"""
