// http_post for a build without libcurl: the enhancer is then unavailable, and says how to get it.
#include "core/error.h"
#include "pipeline/enhance/http_post.h"

namespace avdit::pipeline::enhance {

std::string http_unavailable_reason() {
  return "this avdit was built without libcurl, so it cannot call a prompt enhancer: install "
         "libcurl4-openssl-dev (scripts/setup.sh) and rebuild";
}

HttpResponse http_post(const HttpRequest&) { throw BadInput(http_unavailable_reason()); }

}  // namespace avdit::pipeline::enhance
