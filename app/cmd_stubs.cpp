// Subcommands whose model code is still being wired (temporary; replaced as each lands).
#include "commands.h"
#include "core/error.h"

namespace avdit::app {


}  // namespace avdit::app
