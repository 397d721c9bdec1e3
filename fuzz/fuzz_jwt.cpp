// Fuzz target: an untrusted JSON Web Token in a delivery's header, checked
// as a provider file with `construction: jwt` checks it (Netlify's HS256,
// its claims and body hash): the header and payload's base64url and JSON,
// the algorithm, the claims. A verdict, valid or not, is the only outcome.

#include "idem/record/parser.hpp"
#include "idem/verify/provider_spec.hpp"
#include "idem/verify/verifier.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace {

const idem::verify::VerifyConfig& netlify_config() {
    static const idem::verify::VerifyConfig config = [] {
        idem::verify::VerifyConfig made;
        made.scheme = idem::verify::Scheme::provider;
        made.providers = idem::verify::parse_provider_specs(R"(name: netlify
source: https://docs.netlify.com/site-deploys/deploy-notifications/#payload-signature
signature_header: X-Webhook-Signature
construction: jwt
jwt_algorithm: HS256
jwt_claims:
  iss: netlify
jwt_body_hash: sha256
)",
                                                            "netlify.yaml");
        made.provider = 0;
        made.secrets = {idem::verify::make_secret("netlify-jws-secret", "#1")};
        return made;
    }();
    return config;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static idem::verify::Verifier verifier(netlify_config());
    idem::record::Envelope envelope;
    envelope.method = "POST";
    envelope.path = "/hooks/netlify";
    envelope.body = R"({"id":"deploy_1","state":"ready"})";
    std::string token(reinterpret_cast<const char*>(data), size);
    envelope.headers.push_back({"X-Webhook-Signature", token});
    (void)verifier.verify(envelope, idem::Timestamp(std::chrono::seconds(1700000000)));
    return 0;
}
