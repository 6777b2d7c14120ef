module Counters
  module Rails
    # In a Rails app: rake counters:verify / counters:rebuild, and the generator counters:cache.
    class Railtie < ::Rails::Railtie
      rake_tasks do
        load File.expand_path("../../tasks/counters.rake", __dir__)
      end
    end
  end
end
