// Autograd, for users (kiln.h includes this): grad mode guards, the engine's backward() and
// grad(), gradcheck, and the backward graph's nodes.
#pragma once

#include "../ops/grad_mode.h"
#include "engine.h"
#include "gradcheck.h"
#include "node.h"
