module Counters
  module Rails
    VERSION = "0.5.0"
    # The extension's SQL version the gem needs at least.
    EXTENSION_VERSION = "0.5"
  end
end
