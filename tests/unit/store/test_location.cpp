// Store URIs in messages: what a store is, never its password.

#include "idem/store/location.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::store;

TEST_CASE("a store URI is redacted of its user-info password and password-like parameters") {
    CHECK(redact_store_uri("rediss://default:S3CRET@host:6380") ==
          "rediss://default:***@host:6380");
    CHECK(redact_store_uri("redis://S3CRET@host") == "redis://***@host");
    CHECK(redact_store_uri("redis://host:6379/0?password=S3CRET&db=1") ==
          "redis://host:6379/0?password=***&db=1");
    CHECK(redact_store_uri("redis://host/0?Token=S3CRET") == "redis://host/0?Token=***");
    CHECK(redact_store_uri("idem.db") == "idem.db");
    CHECK(redact_store_uri("redis://host:6379/2") == "redis://host:6379/2");
}

TEST_CASE("no message about a bad store URI holds its password") {
    for (const char* uri : {"rediss://default:S3CRET@host", "redis://h:6379/x?password=S3CRET",
                            "redis://h:x?password=S3CRET", "redis://default:S3CRET@h:6379"}) {
        try {
            (void)parse_store_uri(uri);
            FAIL("accepted ", uri);
        } catch (const UsageError& error) {
            CHECK(std::string(error.what()).find("S3CRET") == std::string::npos);
        }
    }
}
