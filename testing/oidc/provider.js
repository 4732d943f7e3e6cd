// A real OpenID Connect provider for the sign-in tests: panva's node-oidc-provider (an
// OpenID Certified implementation), with its own login and consent pages.
// Usage: node provider.js PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI
// Any login name signs in (its password is not checked: the provider's development
// pages); the account's email is NAME@example.com.
import Provider from "oidc-provider";

const [port, clientId, clientSecret, redirectUri] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code"],
      response_types: ["code"],
    },
  ],
  pkce: { required: () => false },
  claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: `${id}@example.com`, email_verified: true, name: id };
      },
    };
  },
  features: { devInteractions: { enabled: true } },
});
provider.proxy = false;
provider.listen(Number(port), "127.0.0.1", () => console.log(`oidc provider on ${issuer}`));
