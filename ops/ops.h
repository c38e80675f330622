// Every op, for users who want them all (kiln.h includes this).
#pragma once

#include "binary.h"
#include "comparison.h"
#include "dropout.h"
#include "factory.h"
#include "join.h"
#include "layer_norm.h"
#include "loss.h"
#include "matmul.h"
#include "op_scope.h"
#include "reduce.h"
#include "softmax.h"
#include "unary.h"
