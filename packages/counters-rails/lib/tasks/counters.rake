# rake counters:verify[name]   every stored value that differs from its definition (fails if any)
# rake counters:rebuild[name]  make stored counters equal to their definitions
namespace :counters do
  desc "Compare counters with their definitions (counters.verify); fails if any differs"
  task :verify, [:name] => (Rake::Task.task_defined?(:environment) ? :environment : []) do |_, args|
    connection = ActiveRecord::Base.connection
    Counters::Rails.require_extension(connection)
    rows = connection.select_rows("SELECT counter, key::text, column_name, stored, expected " \
                                  "FROM counters.verify(#{args[:name] ? connection.quote(args[:name]) : 'NULL'})")
    rows.each { |r| puts "#{r[0]} #{r[1]} #{r[2]}: stored #{r[3]}, expected #{r[4]}" }
    abort "counters:verify: #{rows.size} values differ" unless rows.empty?
    puts "every counter equals its definition"
  end

  desc "Make counters equal to their definitions (counters.rebuild)"
  task :rebuild, [:name] => (Rake::Task.task_defined?(:environment) ? :environment : []) do |_, args|
    connection = ActiveRecord::Base.connection
    Counters::Rails.require_extension(connection)
    written = connection.select_value("SELECT counters.rebuild(#{args[:name] ? connection.quote(args[:name]) : 'NULL'})")
    puts "#{written} rows written"
  end
end
