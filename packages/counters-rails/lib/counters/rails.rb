# counters-rails: counters (the PostgreSQL extension) from ActiveRecord.
#
#   create_counter :blog_posts, "SELECT blog_id, count(*) AS posts FROM posts GROUP BY blog_id"   # in a migration
#   counter_cache_for :blog, column_name: "posts_count"                                           # in a model
#   rails generate counters:cache                          # the migration of the models' counter caches
#   schema.rb keeps the counters (create_counter after the tables); rake counters:verify, counters:rebuild
#
# Every statement passes names and definitions as quoted literals (connection.quote), never pasted in as SQL.
require "active_record"
require "active_record/migration"
require "active_record/schema_dumper"
require "counters/rails/version"

module Counters
  module Rails
    class Error < StandardError; end

    # What a migration runs (included in the connection adapters, recorded for `change`). Options come as keywords or
    # as a trailing hash (ActiveRecord 6.1's Migration#method_missing passes them so).
    module SchemaStatements
      # Declare a counter. target: an existing table keeping counter-cache columns; mode: "exact", "log" or
      # "sharded"; deferred: applied at commit; algorithm: :concurrently (in a migration with
      # disable_ddl_transaction!) declares it without blocking writers.
      def create_counter(name, sql, options = nil, **keywords)
        options = (options || {}).merge(keywords)
        target, mode, deferred, algorithm = options.values_at(:target, :mode, :deferred, :algorithm)
        mode ||= "exact"
        unknown = options.keys - %i[target mode deferred algorithm]
        raise ArgumentError, "counter #{name}: unknown options #{unknown.join(', ')}" unless unknown.empty?
        Counters::Rails.require_extension(self)
        if algorithm == :concurrently
          if transaction_open?
            raise Error, "counter #{name}: create_counter algorithm: :concurrently commits between its steps: " \
                         "call disable_ddl_transaction! in the migration"
          end
          raise Error, "counter #{name}: a counter-cache counter cannot be declared concurrently" if target
          execute("CALL counters.create_counter_concurrently(#{quote(name.to_s)}, #{quote(sql)}, #{quote(mode.to_s)})")
        elsif algorithm.nil?
          execute("SELECT counters.create_counter(#{quote(name.to_s)}, #{quote(sql)}, " \
                       "#{target ? quote(target.to_s) : 'NULL'}, #{quote(mode.to_s)})")
        else
          raise ArgumentError, "counter #{name}: algorithm must be :concurrently or nil"
        end
        execute("SELECT counters.set_deferred(#{quote(name.to_s)})") if deferred
      end

      # Drop a counter. The definition and options are what `change` reverses it to (without them it cannot be).
      def drop_counter(name, _sql = nil, _options = nil, **_keywords)
        Counters::Rails.require_extension(self)
        execute("SELECT counters.drop_counter(#{quote(name.to_s)})")
      end

      # Change a counter: to: { sql:, mode:, deferred: } (what changes); from: the same before, for `change` to
      # reverse it.
      def alter_counter(name, options = nil, **keywords)
        to = (options || {}).merge(keywords).fetch(:to).to_h
        Counters::Rails.require_extension(self)
        if to[:sql]
          execute("SELECT counters.alter_counter(#{quote(name.to_s)}, mode => #{to[:mode] ? quote(to[:mode].to_s) : 'NULL'}, " \
                       "definition => #{quote(to[:sql])})")
        elsif to[:mode]
          execute("SELECT counters.alter_counter(#{quote(name.to_s)}, #{quote(to[:mode].to_s)})")
        end
        unless to[:deferred].nil?
          execute("SELECT counters.set_deferred(#{quote(name.to_s)}, #{to[:deferred] ? 'true' : 'false'})")
        end
      end
    end

    # `change` migrations: each operation's inverse.
    module CommandRecorder
      def create_counter(*args, **options, &block)
        record(:create_counter, [*args, options], &block)
      end

      def drop_counter(*args, **options, &block)
        record(:drop_counter, [*args, options], &block)
      end

      def alter_counter(*args, **options, &block)
        record(:alter_counter, [*args, options], &block)
      end

      def invert_create_counter(args)
        name, sql, options = args
        [:drop_counter, [name, sql, options.except(:algorithm)]]
      end

      def invert_drop_counter(args)
        name, sql, options = args
        raise ActiveRecord::IrreversibleMigration, "drop_counter #{name} needs its definition to be reversed" if sql.nil?

        [:create_counter, [name, sql, options || {}]]
      end

      def invert_alter_counter(args)
        name, options = args
        raise ActiveRecord::IrreversibleMigration, "alter_counter #{name} needs from: to be reversed" if options[:from].nil?

        [:alter_counter, [name, { to: options[:from], from: options[:to] }]]
      end
    end

    # schema.rb keeps the counters: the tables a counter made are left out of it, and each counter is declared again
    # after the tables (its definition as the extension keeps it, schema-qualified), in the order they were declared.
    module SchemaDumper
      private

      def tables(stream)
        super
        counters(stream)
      end

      def ignored?(table_name)
        @counter_tables ||= Counters::Rails.counter_tables(@connection)
        super || @counter_tables.include?(table_name.to_s)
      end

      def counters(stream)
        rows = Counters::Rails.counters(@connection)
        return if rows.empty?

        stream.puts "  # counters (the PostgreSQL extension): declared again from their definitions"
        rows.each do |row|
          options = []
          options << "target: #{row['target'].inspect}" unless row["created_target"]
          options << "mode: #{row['mode'].inspect}" unless row["mode"] == "exact"
          options << "deferred: true" if row["deferred"]
          definition = row["definition"].strip.chomp(";")
          stream.puts "  create_counter #{row['name'].inspect}, #{definition.inspect}" \
                      "#{options.empty? ? '' : ', ' + options.join(', ')}"
        end
      end
    end

    # In a model: a counter-cache column of the `belongs_to` parent, kept by the database (counter_culture's style;
    # `rails generate counters:cache` writes the migration). column_name: the parent's column; delta_column: sum
    # this column instead of counting rows; where: an SQL condition on this model's rows; deferred: applied at commit.
    module Model
      def counter_cache_for(association, column_name:, delta_column: nil, where: nil, deferred: false)
        Counters::Rails.declarations << { model: self, association: association.to_sym, column_name: column_name.to_s,
                                          delta_column: delta_column&.to_s, where: where, deferred: deferred }
      end
    end

    class << self
      def declarations
        @declarations ||= []
      end

      def installed_version(connection)
        connection.select_value("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'counters'")
      end

      def require_extension(connection)
        version = installed_version(connection)
        if version.nil?
          raise Error, "counters-rails: the counters extension is not installed in this database: " \
                       "enable_extension \"counters\" in a migration first (version #{EXTENSION_VERSION} or later)"
        end
        return if Gem::Version.new(version) >= Gem::Version.new(EXTENSION_VERSION)

        raise Error, "counters-rails: the counters extension is version #{version}; this gem needs " \
                     "#{EXTENSION_VERSION} or later: ALTER EXTENSION counters UPDATE"
      end

      # The counters of the database, in the order they were declared (levels of a chain are the counter's own).
      def counters(connection)
        return [] if installed_version(connection).nil?

        connection.select_all(<<~SQL).to_a
          SELECT c.name, c.definition, c.target::text AS target, c.created_target, c.mode,
                 coalesce((c.options->>'deferred')::boolean, false) AS deferred
            FROM counters.counters c WHERE NOT c.options ? 'part_of' ORDER BY c.created_at, c.name
        SQL
      end

      # The tables the counters made (counter tables, totals, logs and slots), as schema.rb names them.
      def counter_tables(connection)
        return [] if installed_version(connection).nil?

        connection.select_values(<<~SQL)
          SELECT r.relname FROM counters.counter c, unnest(ARRAY[CASE WHEN c.owns_target THEN c.target END,
                                                                  c.totals, c.log]) t(oid)
            JOIN pg_catalog.pg_class r ON r.oid = t.oid
        SQL
      end

      # The definition of a counter-cache declaration: the parent's key from the child's foreign key.
      def cache_definition(declaration)
        model = declaration[:model]
        reflection = model.reflect_on_association(declaration[:association])
        raise Error, "#{model.name}: counter_cache_for #{declaration[:association]}: no such belongs_to" unless reflection&.belongs_to?

        connection = model.connection
        parent = reflection.klass
        value = declaration[:delta_column] ? "sum(#{connection.quote_column_name(declaration[:delta_column])})" : "count(*)"
        sql = "SELECT #{connection.quote_column_name(reflection.foreign_key)} AS #{connection.quote_column_name(parent.primary_key)}, " \
              "#{value} AS #{connection.quote_column_name(declaration[:column_name])} " \
              "FROM #{connection.quote_table_name(model.table_name)}"
        sql += " WHERE #{declaration[:where]}" if declaration[:where]
        sql + " GROUP BY #{connection.quote_column_name(reflection.foreign_key)}"
      end

      def cache_name(declaration)
        parent = declaration[:model].reflect_on_association(declaration[:association]).klass
        "#{parent.table_name}_#{declaration[:column_name]}"
      end
    end
  end
end

ActiveRecord::ConnectionAdapters::AbstractAdapter.include(Counters::Rails::SchemaStatements)
ActiveRecord::Migration::CommandRecorder.include(Counters::Rails::CommandRecorder)
ActiveRecord::SchemaDumper.prepend(Counters::Rails::SchemaDumper)
ActiveRecord::Base.extend(Counters::Rails::Model)
require "counters/rails/railtie" if defined?(::Rails::Railtie)
