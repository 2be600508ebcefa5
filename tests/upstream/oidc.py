"""An OpenID Connect provider on loopback, as Okta, Entra ID or Keycloak behave.

`/.well-known/openid-configuration` (discovery), `/authorize` (the
authorization code flow: it signs in `person` at once and sends the browser
back with `code` and `state`; a redirect_uri not registered is refused),
`/token` (client_secret_basic; PKCE S256 checked against the challenge; a
code used once), `/jwks` (the current public keys), `/userinfo`. ID tokens
are RS256 JWTs signed with the current key, carrying `iss`, `sub`, `aud`,
`exp`, `iat`, `nonce`, the person's e-mail, names and `groups`.

A test makes it misbehave the ways a provider (or someone in the middle)
can: `claims` overrides any claim of the next ID tokens (a wrong issuer or
audience, an expired token, another nonce), `forge()` signs with a key the
JWKS does not hold under the kid it does, `rotate()` starts signing with a
new key (the JWKS then lists it, under a kid the service has not seen).
"""

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from joserfc import jwt
from joserfc.jwk import RSAKey

from .server import Request, Response, Upstream


@dataclass
class Person:
    sub: str
    email: str
    preferred_username: str
    given_name: str = ""
    family_name: str = ""
    groups: list[str] = field(default_factory=list)


class FakeOIDC(Upstream):
    def __init__(self, client_id: str = "qa-search", client_secret: str = "s3cret-for-the-test"):
        super().__init__()
        self.client_id, self.client_secret = client_id, client_secret
        self.redirect_uris: set[str] = set()
        self.person = Person("00u1a2b3c4", "nina@example.com", "nina", "Nina", "Novak", ["qa-mobile"])
        self.keys = [RSAKey.generate_key(2048, parameters={"kid": "key-1", "use": "sig", "alg": "RS256"})]
        self.signing = self.keys[0]
        self.codes: dict[str, dict] = {}
        self.claims: dict = {}  # overrides of the next ID tokens' claims
        self.issuer_override: str | None = None  # what discovery says the issuer is

    @property
    def issuer(self) -> str:
        return self.url

    # -- the test's controls ---------------------------------------------------------------

    def rotate(self) -> None:
        new = RSAKey.generate_key(2048, parameters={"kid": f"key-{len(self.keys) + 1}", "use": "sig", "alg": "RS256"})
        self.keys = [new]
        self.signing = new

    def forge(self) -> None:
        """Sign with a key of the attacker's under the kid the JWKS lists: a bad signature."""
        kid = self.signing.kid
        self.signing = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})

    def id_token(self, nonce: str | None, person: Person) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": person.sub,
            "aud": self.client_id,
            "exp": now + 300,
            "iat": now,
            "auth_time": now,
            "email": person.email,
            "email_verified": True,
            "preferred_username": person.preferred_username,
            "given_name": person.given_name,
            "family_name": person.family_name,
            "groups": person.groups,
            **({"nonce": nonce} if nonce else {}),
            **self.claims,
        }
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode({"alg": "RS256", "kid": self.signing.kid}, claims, self.signing)

    # -- the API ---------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        if request.path == "/.well-known/openid-configuration":
            return Response(200, self.discovery())
        if request.path == "/jwks":
            return Response(200, {"keys": [key.as_dict(private=False) for key in self.keys]})
        if request.path == "/authorize":
            return self.authorize(request)
        if request.path == "/token" and request.method == "POST":
            return self.token(request)
        if request.path == "/userinfo":
            return Response(200, {"sub": self.person.sub, "email": self.person.email})
        return Response(404, {"error": "not_found"})

    def discovery(self) -> dict:
        return {
            "issuer": self.issuer_override or self.issuer,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "jwks_uri": f"{self.url}/jwks",
            "userinfo_endpoint": f"{self.url}/userinfo",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "email", "profile", "groups"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
            "claims_supported": ["sub", "email", "preferred_username", "groups"],
        }

    def authorize(self, request: Request) -> Response:
        q = request.query
        if q.get("client_id") != self.client_id or q.get("redirect_uri") not in self.redirect_uris:
            return Response(400, "<html><body>Invalid client or redirect_uri</body></html>")
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return Response(400, "<html><body>PKCE with S256 is required</body></html>")
        code = secrets.token_urlsafe(24)
        self.codes[code] = {
            "nonce": q.get("nonce"),
            "challenge": q["code_challenge"],
            "redirect_uri": q["redirect_uri"],
            "person": self.person,
        }
        back = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", "")})
        return Response(302, "", {"Location": back})

    def token(self, request: Request) -> Response:
        form = dict(parse_qsl(request.body.decode()))
        basic = request.basic_auth()
        client = basic or (form.get("client_id"), form.get("client_secret"))
        if tuple(client) != (self.client_id, self.client_secret):
            return Response(401, {"error": "invalid_client"})
        grant = self.codes.pop(form.get("code", ""), None)  # a code works once
        if grant is None or form.get("redirect_uri") != grant["redirect_uri"]:
            return Response(400, {"error": "invalid_grant", "error_description": "the code is unknown or used"})
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != grant["challenge"]:
            return Response(400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
        return Response(
            200,
            {
                "access_token": secrets.token_urlsafe(24),
                "token_type": "Bearer",
                "expires_in": 3600,
                "id_token": self.id_token(grant["nonce"], grant["person"]),
            },
        )
