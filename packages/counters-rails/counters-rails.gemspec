# The gem's version follows the extension's SQL version it needs (0.5), then its own releases.
require_relative "lib/counters/rails/version"

Gem::Specification.new do |spec|
  spec.name = "counters-rails"
  spec.version = Counters::Rails::VERSION
  spec.summary = "Counters kept by PostgreSQL (the counters extension) in ActiveRecord migrations, models and schema.rb"
  spec.description = "Migration helpers (create_counter, alter_counter, drop_counter, reversible), a counter-cache " \
                     "declaration in the model with a generator for its migration, schema.rb that keeps counters, " \
                     "and rake tasks to verify and rebuild them."
  spec.authors = ["counters developers"]
  spec.license = "PostgreSQL"
  spec.files = Dir["lib/**/*", "README.md"]
  spec.require_paths = ["lib"]
  spec.required_ruby_version = ">= 2.7"
  spec.add_dependency "activerecord", ">= 6.1", "< 8.1"
  spec.add_dependency "pg", "~> 1.1"
end
