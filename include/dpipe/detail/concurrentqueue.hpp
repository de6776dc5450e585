#pragma once
/// \file
/// The one place that knows where moodycamel's headers live: Debian's libconcurrentqueue-dev
/// 1.0.3 installs <concurrentqueue/...>, upstream >= 1.0.4 installs <moodycamel/...>.

#if __has_include(<concurrentqueue/blockingconcurrentqueue.h>)
#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/concurrentqueue.h>
#include <concurrentqueue/lightweightsemaphore.h>
#elif __has_include(<moodycamel/blockingconcurrentqueue.h>)
#include <moodycamel/blockingconcurrentqueue.h>
#include <moodycamel/concurrentqueue.h>
#include <moodycamel/lightweightsemaphore.h>
#else
#error "dpipe: moodycamel concurrentqueue headers not found (install libconcurrentqueue-dev)"
#endif
