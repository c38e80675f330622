// The optim layer: optimizers and learning-rate schedulers (kiln.h includes this).
#pragma once

#include "adam.h"
#include "lr_scheduler.h"
#include "optimizer.h"
#include "sequential_lr.h"
#include "sgd.h"
#include "state_io.h"
