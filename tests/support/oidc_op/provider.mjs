// A real OpenID provider for the single sign-on tests: the certified `oidc-provider`, on a free
// loopback port. The test passes one JSON argument (client, redirect URI, the account that signs in
// and the faults to issue) and reads {"issuer": ...} from the first line of stdout.
// Faults: "audience" re-signs the ID token for another client, "expired" re-signs it as expired an
// hour ago; both with the provider's own key, as a misbehaving or replayed provider answer would be.
import crypto from "node:crypto";
import http from "node:http";
import Provider from "oidc-provider";

const options = JSON.parse(process.argv[2]);
const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: "jwk" }), kid: "test-key", alg: "RS256", use: "sig" };

function resign(idToken, fault) {
  const [header, payload] = idToken.split(".");
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
  if (fault.audience) claims.aud = fault.audience;
  if (fault.expired) {
    const now = Math.floor(Date.now() / 1000);
    claims.iat = now - 7200;
    claims.exp = now - 3600;
  }
  const body = `${header}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`;
  return `${body}.${crypto.sign("sha256", Buffer.from(body), privateKey).toString("base64url")}`;
}

let provider;
const server = http.createServer(async (req, res) => {
  const interaction = req.url.match(/^\/interaction\/([^/?]+)/);
  if (!interaction) return provider.callback()(req, res);
  // No login form: the account given on the command line signs in and consents at once.
  try {
    const details = await provider.interactionDetails(req, res);
    const grant = new provider.Grant({ accountId: options.account.sub, clientId: details.params.client_id });
    grant.addOIDCScope(details.params.scope);
    const grantId = await grant.save();
    await provider.interactionFinished(
      req, res, { login: { accountId: options.account.sub }, consent: { grantId } }, { mergeWithLastSubmission: false },
    );
  } catch (error) {
    res.statusCode = 500;
    res.end(String(error));
  }
});

server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = new Provider(issuer, {
    clients: [{
      client_id: options.client_id,
      client_secret: options.client_secret,
      redirect_uris: [options.redirect_uri],
      token_endpoint_auth_method: "client_secret_post",
    }],
    jwks: { keys: [jwk] },
    claims: {
      openid: ["sub"],
      email: ["email", "email_verified"],
      profile: ["name", "given_name", "preferred_username", ...(options.team_claim ? [options.team_claim] : [])],
    },
    findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ ...options.account, sub }) }),
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    cookies: { keys: ["test-only-cookie-key"] },
  });
  const fault = options.id_token || {};
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === "/token" && ctx.body && ctx.body.id_token && (fault.audience || fault.expired)) {
      ctx.body = { ...ctx.body, id_token: resign(ctx.body.id_token, fault) };
    }
  });
  process.stdout.write(JSON.stringify({ issuer }) + "\n");
});
