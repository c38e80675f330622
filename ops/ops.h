// Every op, for users who want them all (kiln.h includes this).
#pragma once

#include "binary.h"
#include "clamp.h"
#include "comparison.h"
#include "dropout.h"
#include "factory.h"
#include "indexing.h"
#include "join.h"
#include "layer_norm.h"
#include "literal.h"
#include "loss.h"
#include "masked_fill.h"
#include "matmul.h"
#include "op_scope.h"
#include "reduce.h"
#include "softmax.h"
#include "unary.h"
