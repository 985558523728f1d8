#pragma once
#if !defined(__cplusplus) || __cplusplus < 202002L
#error C++20 or later compatible compiler is required to use ATen.
#endif
namespace at { inline int standin() { return 0; } }
