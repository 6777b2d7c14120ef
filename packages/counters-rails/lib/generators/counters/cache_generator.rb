require "rails/generators"
require "rails/generators/active_record"

module Counters
  module Generators
    # rails generate counters:cache: a migration for the counter caches the models declare (counter_cache_for) that
    # the database does not have yet: the parent's column (add_column, bigint, default 0, unless it exists) and the
    # counter, reversible.
    class CacheGenerator < ::Rails::Generators::Base
      include ::ActiveRecord::Generators::Migration
      source_root File.expand_path("templates", __dir__)
      class_option :name, type: :string, default: "add_counter_caches", desc: "the migration's name"

      def create_migration_file
        ::Rails.application.eager_load! if defined?(::Rails.application) && ::Rails.application
        connection = ::ActiveRecord::Base.connection
        installed = Counters::Rails.counters(connection).map { |r| r["name"] }
        @caches = Counters::Rails.declarations.reject { |d| installed.include?(Counters::Rails.cache_name(d)) }.map do |d|
          parent = d[:model].reflect_on_association(d[:association]).klass
          { name: Counters::Rails.cache_name(d), sql: Counters::Rails.cache_definition(d), table: parent.table_name,
            column: d[:column_name], deferred: d[:deferred],
            add_column: !connection.column_exists?(parent.table_name, d[:column_name]) }
        end
        if @caches.empty?
          say "every declared counter cache is in the database"
          return
        end
        migration_template "migration.rb.tt", File.join(db_migrate_path, "#{options[:name]}.rb")
      end

      private

      def db_migrate_path
        ::Rails.application ? super : "db/migrate"
      end

      def migration_class_name
        options[:name].camelize
      end

      def migration_version
        "[#{::ActiveRecord::VERSION::MAJOR}.#{::ActiveRecord::VERSION::MINOR}]"
      end
    end
  end
end
