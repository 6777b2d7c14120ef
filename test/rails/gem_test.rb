# counters-rails (packages/counters-rails) on Debian's ActiveRecord and railties 6.1, without a Rails app: a `change`
# migration declares counters with the helpers and is reverted; a model's counter_cache_for becomes a migration by
# the generator (compared with the fixture checked in), which runs forward and back; schema.rb keeps the counters, and
# a database loaded from it counts; the rake tasks verify and rebuild; a database without the extension gets a clear
# error. After each write, each counter equals an ActiveRecord recount.
$LOAD_PATH.unshift File.expand_path("../../packages/counters-rails/lib", __dir__)
require "rails"
require "counters/rails"
require "generators/counters/cache_generator"
require "rake"
require "minitest/autorun"
require "stringio"
require "tmpdir"

DB = ENV.fetch("RAILS_DB")
CONFIG = { adapter: "postgresql", host: ENV["PGHOST"], port: ENV["PGPORT"], username: ENV["PGUSER"],
           password: ENV["PGPASSWORD"] }.freeze
ActiveRecord::Base.establish_connection(CONFIG.merge(database: DB))
ActiveRecord::Migration.verbose = false

class CreateForum < ActiveRecord::Migration[6.1]
  def change
    enable_extension "counters"
    create_table :forums do |t|
      t.text :name
    end
    create_table :topics do |t|
      t.references :forum, null: false
      t.boolean :published, null: false, default: false
      t.integer :score, null: false, default: 0
    end
    create_counter :forum_topics, "SELECT forum_id, count(*) AS topics, sum(score) AS score FROM topics " \
                                  "WHERE published GROUP BY forum_id"
    create_counter :forum_hot, "SELECT forum_id, count(*) AS topics FROM topics GROUP BY forum_id", mode: "log",
                               deferred: true
  end
end

class ChangeForum < ActiveRecord::Migration[6.1]
  def change
    alter_counter :forum_topics, from: { sql: "SELECT forum_id, count(*) AS topics, sum(score) AS score FROM topics " \
                                              "WHERE published GROUP BY forum_id" },
                                 to: { sql: "SELECT forum_id, count(*) AS topics, sum(score) AS score FROM topics " \
                                            "GROUP BY forum_id" }
    drop_counter :forum_hot, "SELECT forum_id, count(*) AS topics FROM topics GROUP BY forum_id", mode: "log", deferred: true
  end
end

class Forum < ActiveRecord::Base; end

class Topic < ActiveRecord::Base
  belongs_to :forum
  counter_cache_for :forum, column_name: "topics_count"
  counter_cache_for :forum, column_name: "published_score", delta_column: "score", where: "published", deferred: true
end

class CountersRailsTest < Minitest::Test
  def connection
    ActiveRecord::Base.connection
  end

  # (each test starts from a database with the extension and no counter, no table of the tests)
  def setup
    connection.execute("CREATE EXTENSION IF NOT EXISTS counters")
    connection.execute("SELECT counters.drop_counter(name) FROM counters.counter WHERE NOT options ? 'part_of'")
    connection.execute("DROP TABLE IF EXISTS topics, forums CASCADE")
    connection.execute("DELETE FROM schema_migrations") if connection.table_exists?("schema_migrations")
  end

  def counters
    connection.select_rows("SELECT name, mode, coalesce((options->>'deferred')::boolean, false) FROM counters.counter " \
                           "ORDER BY name")
  end

  def assert_exact(step, published_only: true)
    scope = published_only ? Topic.where(published: true) : Topic.all
    recount = scope.group(:forum_id).pluck(:forum_id, Arel.sql("count(*)"), Arel.sql("sum(score)")).sort
    assert_equal recount, connection.select_rows("SELECT forum_id, topics, score FROM forum_topics ORDER BY 1"), step
    assert_equal 0, connection.select_value("SELECT count(*) FROM counters.verify()"), step
  end

  def write
    forums = (1..3).map { |i| Forum.create!(name: "forum #{i}") }
    Topic.insert_all((1..30).map { |i| { forum_id: forums[i % 3].id, score: i, published: i.odd? } })
    Topic.where("score < 10").update_all(forum_id: forums[0].id)
    Topic.where("score > 25").delete_all
    Topic.transaction do
      Topic.create!(forum: forums[1], score: 100, published: true)
      raise ActiveRecord::Rollback
    end
    Topic.create!(forum: forums[2], score: 7, published: true)
  end

  def test_helpers_reversible_and_schema_rb
    CreateForum.migrate(:up)
    assert_equal [["forum_hot", "log", true], ["forum_topics", "exact", false]], counters
    write
    assert_exact "the helpers' counters"
    ChangeForum.migrate(:up)
    assert_equal [["forum_topics", "exact", false]], counters
    assert_exact "alter_counter: every topic", published_only: false
    ChangeForum.migrate(:down)
    assert_equal [["forum_hot", "log", true], ["forum_topics", "exact", false]], counters
    assert_exact "alter_counter reverted"

    # schema.rb: the counters after the tables, their own tables left out
    schema = StringIO.new
    ActiveRecord::SchemaDumper.dump(connection, schema)
    schema = schema.string
    assert_match(/create_counter "forum_topics", "SELECT/, schema)
    assert_match(/create_counter "forum_hot", .*mode: "log", deferred: true/, schema)
    refute_match(/create_table "forum_topics"|create_table "forum_hot/, schema)
    copy = "#{DB}_copy"
    connection.drop_database(copy)
    connection.create_database(copy)
    begin
      ActiveRecord::Base.establish_connection(CONFIG.merge(database: copy))
      ActiveRecord::Schema.class_eval(schema.sub(/\AActiveRecord::Schema.define/, "define"))
      assert_equal [["forum_hot", "log", true], ["forum_topics", "exact", false]], counters
      write
      assert_exact "a database loaded from schema.rb counts"
    ensure
      ActiveRecord::Base.establish_connection(CONFIG.merge(database: DB))
      connection.drop_database(copy)
    end

    # rake counters:verify and counters:rebuild
    Rake.application = Rake::Application.new
    load File.expand_path("../../packages/counters-rails/lib/tasks/counters.rake", __dir__)
    out, = capture_io { Rake::Task["counters:verify"].invoke }
    assert_match(/every counter equals its definition/, out)
    connection.execute("UPDATE forum_topics SET topics = topics + 1")
    Rake::Task["counters:verify"].reenable
    assert_raises(SystemExit) { capture_io { Rake::Task["counters:verify"].invoke } }
    capture_io { Rake::Task["counters:rebuild"].invoke("forum_topics") }
    assert_exact "rebuilt by the rake task"

    CreateForum.migrate(:down)
    refute connection.table_exists?("forum_topics"), "reverted: the counter table went with its counter"
  end

  def test_generator
    CreateForum.migrate(:up)
    Dir.mktmpdir do |dir|
      capture_io { Counters::Generators::CacheGenerator.start([], destination_root: dir) }
      files = Dir[File.join(dir, "db/migrate/*_add_counter_caches.rb")]
      assert_equal 1, files.size
      generated = File.read(files.first)
      fixture = File.expand_path("fixtures/add_counter_caches.rb", __dir__)
      File.write(fixture, generated) if ENV["COUNTERS_WRITE_FIXTURES"] # (to regenerate it after changing the generator)
      assert_equal File.read(fixture), generated,
                   "the generator's migration differs from test/rails/fixtures/add_counter_caches.rb"
      load files.first
      AddCounterCaches.migrate(:up)
      Forum.reset_column_information
      write
      Forum.reset_column_information
      Forum.all.each do |f|
        assert_equal Topic.where(forum_id: f.id).count, f.topics_count, "topics_count of forum #{f.id}"
        assert_equal Topic.where(forum_id: f.id, published: true).sum(:score), f.published_score, "published_score"
      end
      assert_equal 0, connection.select_value("SELECT count(*) FROM counters.verify()")
      capture_io { Counters::Generators::CacheGenerator.start([], destination_root: dir) }
      assert_equal 1, Dir[File.join(dir, "db/migrate/*.rb")].size, "nothing left to generate"
      AddCounterCaches.migrate(:down)
      Forum.reset_column_information
      refute Forum.column_names.include?("topics_count")
    end
    CreateForum.migrate(:down)
  end

  def test_concurrently
    CreateForum.migrate(:up)
    write
    sql = "SELECT forum_id, sum(score) AS score FROM topics GROUP BY forum_id"
    error = assert_raises(Counters::Rails::Error) do
      connection.transaction { connection.create_counter(:forum_scores, sql, algorithm: :concurrently) }
    end
    assert_match(/disable_ddl_transaction!/, error.message)
    connection.create_counter(:forum_scores, sql, algorithm: :concurrently)
    assert_equal Topic.group(:forum_id).order(:forum_id).pluck(:forum_id, Arel.sql("sum(score)")),
                 connection.select_rows("SELECT forum_id, score FROM forum_scores ORDER BY 1")
    connection.drop_counter(:forum_scores)
    CreateForum.migrate(:down)
  end

  def test_missing_extension
    error = assert_raises(Counters::Rails::Error) do
      connection.transaction do
        connection.execute("DROP EXTENSION IF EXISTS counters CASCADE")
        connection.create_counter(:x, "SELECT 1")
      end
    end
    assert_match(/counters extension is not installed/, error.message)
    assert Counters::Rails.installed_version(connection), "(the transaction rolled back: the extension is still there)"
  end
end
