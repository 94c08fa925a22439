-- In a directory the recursive load test skips ("vendor"): never loaded.
error("vendor/vendored.lua must not be loaded")
