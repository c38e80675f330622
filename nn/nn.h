// The nn layer: modules, initialisers, state dicts and safetensors checkpoints (kiln.h
// includes this).
#pragma once

#include "activation.h"
#include "clip_grad.h"
#include "embedding.h"
#include "init.h"
#include "linear.h"
#include "mlp.h"
#include "module.h"
#include "safetensors.h"
#include "sequential.h"
#include "state_dict.h"
