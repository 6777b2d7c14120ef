# ActiveRecord (Debian's ruby-activerecord 6.1) against counters, without a Rails app: a migration declares the
# counter, models write with update_all, insert_all, delete_all, create and a rolled-back transaction, and after each
# step the counter table (read through a model) must equal a recount made with ActiveRecord's own grouping.
require "active_record"
require "minitest/autorun"
require "tmpdir"

ActiveRecord::Base.establish_connection(
  adapter: "postgresql", database: ENV.fetch("RAILS_DB"), host: ENV["PGHOST"], port: ENV["PGPORT"],
  username: ENV["PGUSER"], password: ENV["PGPASSWORD"]
)

class CreateBlogPosts < ActiveRecord::Migration[6.1]
  def up
    create_table :posts do |t|
      t.integer :blog_id, null: false
      t.integer :rating, null: false, default: 0
      t.boolean :is_deleted, null: false, default: false
    end
    execute "CREATE EXTENSION IF NOT EXISTS counters"
    execute <<~SQL
      SELECT counters.create_counter('blog_posts', $$
        SELECT blog_id, count(*) AS posts, sum(rating) AS rating FROM posts WHERE NOT is_deleted GROUP BY blog_id $$)
    SQL
  end

  def down
    execute "SELECT counters.drop_counter('blog_posts')"
    drop_table :posts
  end
end

# The configuration of a second database beside the test's (RAILS_DB_copy), for a dump loaded into it.
def copy_config(config)
  ActiveRecord::DatabaseConfigurations::HashConfig.new(
    "test", "copy", config.configuration_hash.merge(database: "#{ENV.fetch('RAILS_DB')}_copy")
  )
end

class Post < ActiveRecord::Base; end

class BlogPost < ActiveRecord::Base
  self.table_name = "blog_posts"
  self.primary_key = "blog_id"
end

class CountersWithActiveRecord < Minitest::Test
  def setup
    ActiveRecord::Migration.verbose = false
    CreateBlogPosts.migrate(:up)
  end

  def teardown
    CreateBlogPosts.migrate(:down)
  end

  def assert_exact(step)
    recount = Post.where(is_deleted: false).group(:blog_id).pluck(:blog_id, Arel.sql("count(*)"), Arel.sql("sum(rating)"))
                  .map { |b, n, r| [b, [n, r.to_i]] }.reject { |_, v| v == [0, 0] }.to_h
    stored = BlogPost.pluck(:blog_id, :posts, :rating).map { |b, n, r| [b, [n, r]] }.to_h
    assert_equal recount, stored, step
    assert_equal 0, ActiveRecord::Base.connection.select_value("SELECT count(*) FROM counters.verify('blog_posts')"), step
  end

  def test_active_record_writes
    Post.insert_all((1..50).map { |i| { blog_id: 1 + i % 3, rating: i } })
    assert_exact "insert_all"
    Post.create!(blog_id: 2, rating: 7)
    assert_exact "create"
    Post.where("rating < 10").update_all(blog_id: 3)
    assert_exact "update_all moving posts"
    Post.where("rating > 40").update_all(is_deleted: true)
    assert_exact "update_all soft delete"
    Post.transaction do
      Post.update_all("rating = rating * 2")
      Post.create!(blog_id: 1, rating: 100)
      raise ActiveRecord::Rollback
    end
    assert_exact "rolled-back transaction"
    Post.where(blog_id: 2).delete_all
    assert_exact "delete_all"
  end
end

# Rails' structure.sql (config.active_record.schema_format = :sql) is pg_dump --schema-only: it holds no catalog row,
# and loading it (db:test:prepare, CI) declares the counter again from the description its definition view carries,
# when it creates the counter's triggers. Then writes are counted, against a recount. (Rails' default schema.rb
# cannot hold a counter at all: docs/clients.md.)
class StructureSqlKeepsCounters < Minitest::Test
  def test_structure_sql_load_counts
    ActiveRecord::Migration.verbose = false
    CreateBlogPosts.migrate(:up)
    config = ActiveRecord::Base.connection_db_config
    copy = copy_config(config)
    file = File.join(Dir.tmpdir, "counters_structure_#{Process.pid}.sql")
    ActiveRecord::Tasks::DatabaseTasks.structure_dump(config, file)
    ActiveRecord::Tasks::DatabaseTasks.drop(copy) rescue nil
    ActiveRecord::Tasks::DatabaseTasks.create(copy)
    ActiveRecord::Tasks::DatabaseTasks.structure_load(copy, file)
    ActiveRecord::Base.establish_connection(copy.configuration_hash)
    assert_equal "blog_posts", ActiveRecord::Base.connection.select_value("SELECT string_agg(name, ', ') FROM counters.counter")
    Post.insert_all((1..30).map { |i| { blog_id: 1 + i % 3, rating: i } })
    Post.where("rating < 10").update_all(blog_id: 3)
    Post.where(blog_id: 2).delete_all
    recount = Post.where(is_deleted: false).group(:blog_id).pluck(:blog_id, Arel.sql("count(*)"), Arel.sql("sum(rating)"))
                  .map { |b, n, r| [b, [n, r.to_i]] }.to_h
    stored = BlogPost.pluck(:blog_id, :posts, :rating).map { |b, n, r| [b, [n, r]] }.to_h
    assert_equal recount, stored, "a database loaded from structure.sql counts"
    assert_equal 0, ActiveRecord::Base.connection.select_value("SELECT count(*) FROM counters.verify('blog_posts')")
  ensure
    ActiveRecord::Tasks::DatabaseTasks.drop(copy) rescue nil
    ActiveRecord::Base.establish_connection(config.configuration_hash)
    File.delete(file) if file && File.exist?(file)
    CreateBlogPosts.migrate(:down)
  end
end

# Rails' default schema.rb cannot hold a counter, and nothing fails when it is loaded: what docs/clients.md says, so
# that the documented advice (schema_format = :sql, and the check below) stays true. ActiveRecord dumps the counter
# table as a plain table (or, for a key index it cannot parse, a "Could not dump table" comment), and neither the
# definition view nor the triggers; a database loaded from it has no counter, and its counter table stays empty
# while posts are written. The documented check, counters.counters against the counters the migrations declare,
# tells.
class SchemaRbLosesCounters < Minitest::Test
  def test_schema_rb_load_has_no_counter
    ActiveRecord::Migration.verbose = false
    CreateBlogPosts.migrate(:up)
    config = ActiveRecord::Base.connection_db_config
    copy = copy_config(config)
    file = File.join(Dir.tmpdir, "counters_schema_#{Process.pid}.rb")
    File.open(file, "w") { |f| ActiveRecord::SchemaDumper.dump(ActiveRecord::Base.connection, f) }
    schema = File.read(file)
    assert_match(/enable_extension "counters"/, schema)
    assert_match(/create_table "blog_posts"/, schema, "the counter table is dumped as a plain table")
    refute_match(/create_counter|blog_posts_definition/, schema)
    ActiveRecord::Tasks::DatabaseTasks.drop(copy) rescue nil
    ActiveRecord::Tasks::DatabaseTasks.create(copy)
    ActiveRecord::Base.establish_connection(copy.configuration_hash)
    load file
    assert_equal 0, ActiveRecord::Base.connection.select_value("SELECT count(*) FROM counters.counters"),
                 "the documented check: a database loaded from schema.rb lists no counter"
    Post.insert_all((1..10).map { |i| { blog_id: 1 + i % 3, rating: i } })
    assert_equal 0, BlogPost.count, "and its counter table is never counted"
  ensure
    ActiveRecord::Tasks::DatabaseTasks.drop(copy) rescue nil
    ActiveRecord::Base.establish_connection(config.configuration_hash)
    File.delete(file) if file && File.exist?(file)
    CreateBlogPosts.migrate(:down)
  end
end
