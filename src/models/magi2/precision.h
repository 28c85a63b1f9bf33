// The family's name for the shared bf16 emulation (models/precision.h).
#pragma once

#include "models/precision.h"

namespace avdit::models::magi2 {
using ::avdit::models::Rounding;
}  // namespace avdit::models::magi2
