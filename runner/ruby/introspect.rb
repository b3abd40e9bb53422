# frozen_string_literal: true

# Complete and inspect requests for the Ruby runner (PROTOCOL.md: `complete`, `inspect`).
#
# Answers come from what the cells' binding holds without running cell code: locals through
# the binding, constants only when defined and not autoloaded, methods listed and looked up
# through Kernel's own implementations (so an object's overridden `methods`, `method` or
# `inspect` never runs), and values shown with their own `inspect` only when they are plain
# data (strings, numbers, symbols, and arrays and hashes of those).

require "ripper"

module VeyyonRunner
  # Completions and `obj?` texts for one binding; cell sources kept for `obj??`.
  module Introspect
    MAX_COMPLETIONS = 500
    MAX_INSPECT_CHARS = 65_536
    MAX_SOURCE_LINES = 400
    MISSING = Object.new.freeze
    KEYWORDS = %w[
      BEGIN END __ENCODING__ __FILE__ __LINE__ alias and begin break case class def defined? do else elsif end
      ensure false for if in module next nil not or redo rescue retry return self super then true undef unless
      until when while yield
    ].freeze
    PLAIN = [String, Symbol, Integer, Float, Rational, Complex, NilClass, TrueClass, FalseClass].freeze
    KERNEL = %i[methods public_methods private_methods singleton_methods method instance_variables instance_variable_get
                class to_s].to_h { |name| [name, Kernel.instance_method(name)] }.freeze
    MODULE = %i[constants const_get const_defined? autoload? instance_method name ancestors].to_h do |name|
      [name, Module.instance_method(name)]
    end.freeze
    RECEIVER = /((?:@)?[A-Za-z_]\w*(?:::[A-Z]\w*)*)(\.|&\.|::)(\w*[?!]?)\z/.freeze
    NAME_AT = /(?:@{1,2}|\$)?[A-Za-z_]\w*(?:(?:\.|&\.|::)[A-Za-z_]\w*)*[?!]?/.freeze

    module_function

    def kernel(name, object, *args)
      KERNEL.fetch(name).bind_call(object, *args)
    end

    def module_call(name, mod, *args)
      MODULE.fetch(name).bind_call(mod, *args)
    end

    # [matches, cursorStart] for the token before `cursor` (code points) of `code`.
    def complete(binding_, code, cursor)
      before = code[0, cursor].to_s.split("\n", -1).last.to_s
      if (member = RECEIVER.match(before))
        receiver = resolve(binding_, member[1])
        names = receiver.equal?(MISSING) ? [] : member_names(receiver, member[2])
        return [select(names, member[3]), cursor - member[3].length]
      end
      if (ivar = /@\w*\z/.match(before))
        names = kernel(:instance_variables, binding_.receiver).map(&:to_s)
        return [select(names, ivar[0]), cursor - ivar[0].length]
      end
      if (global = /\$\w*\z/.match(before))
        return [select(global_variables.map(&:to_s), global[0]), cursor - global[0].length]
      end
      prefix = /[A-Za-z_]\w*[?!]?\z/.match(before)&.[](0).to_s
      return [[], cursor] if prefix.empty? && before =~ /\d\z/

      [select(bare_names(binding_, prefix), prefix), cursor - prefix.length]
    end

    def select(names, prefix)
      names.uniq.select { |name| name.start_with?(prefix) && (prefix.start_with?("_") || !name.start_with?("_")) }
           .sort.first(MAX_COMPLETIONS)
    end

    def bare_names(binding_, prefix)
      main = binding_.receiver
      names = binding_.local_variables.map(&:to_s)
      names.concat(kernel(:methods, main).map(&:to_s), kernel(:private_methods, main).map(&:to_s)) if Kernel === main
      names.concat(Object.constants.map(&:to_s)) if prefix.empty? || prefix.match?(/\A[A-Z]/)
      names.concat(KEYWORDS)
    end

    def member_names(receiver, separator)
      names = []
      if Module === receiver && separator == "::"
        names.concat(module_call(:constants, receiver).map(&:to_s))
        names.concat(kernel(:singleton_methods, receiver).map(&:to_s))
      end
      names.concat(kernel(:public_methods, receiver).map(&:to_s)) if separator != "::" && Kernel === receiver
      names
    end

    # The value `path` names (a local, @ivar of main, or constant path), or MISSING; runs no cell code.
    def resolve(binding_, path)
      if path.start_with?("@")
        main = binding_.receiver
        return MISSING unless Kernel === main && kernel(:instance_variables, main).include?(path.to_sym)

        return kernel(:instance_variable_get, main, path.to_sym)
      end
      first, *rest = path.split("::")
      value = if first.match?(/\A[A-Z]/)
                constant(Object, first)
              elsif binding_.local_variable_defined?(first.to_sym)
                binding_.local_variable_get(first.to_sym)
              else
                MISSING
              end
      rest.each do |name|
        break if value.equal?(MISSING)

        value = Module === value ? constant(value, name) : MISSING
      end
      value
    end

    def constant(mod, name)
      sym = name.to_sym
      return MISSING unless module_call(:const_defined?, mod, sym) && module_call(:autoload?, mod, sym).nil?

      module_call(:const_get, mod, sym)
    rescue NameError
      MISSING
    end

    # The `obj?` text for the name at `cursor` (detail 1: a method's source too), or nil.
    def inspect_text(binding_, code, cursor, detail, sources)
      name = name_at(code, cursor)
      return nil if name.nil?

      target = resolve_target(binding_, name)
      return nil if target.equal?(MISSING)

      fields = Method === target || UnboundMethod === target ? method_fields(target, detail, sources) : value_fields(target)
      text = fields.compact.map { |label, body| body.include?("\n") ? "#{label}:\n#{body}" : "#{"#{label}:".ljust(12)} #{body}" }.join("\n")
      clip(text, MAX_INSPECT_CHARS)
    end

    def name_at(code, cursor)
      line_start = (code.rindex("\n", [cursor - 1, 0].max) || -1) + 1
      line = code[line_start..].to_s.split("\n", 2).first.to_s
      at = cursor - line_start
      line.scan(NAME_AT) do
        match = Regexp.last_match
        return match[0] if match.begin(0) <= at && at <= match.end(0)
      end
      open = code[0, cursor].to_s.rindex("(")
      return nil if open.nil?

      code[0, open].to_s[/#{NAME_AT.source}\s*\z/]&.strip
    end

    # A value, a Method, or MISSING for `name`: `x`, `A::B`, `@x`, `x.meth`, `A.meth`, or a method of main.
    def resolve_target(binding_, name)
      parts = name.split(/(\.|&\.)/)
      if parts.length >= 3
        receiver = resolve(binding_, parts[0])
        return MISSING if receiver.equal?(MISSING) || parts.length > 3 || !(Kernel === receiver)

        return method_of(receiver, parts[2])
      end
      value = resolve(binding_, name)
      return value unless value.equal?(MISSING)
      return MISSING if name.include?("::") || name.start_with?("@", "$")

      main = binding_.receiver
      Kernel === main ? method_of(main, name) : MISSING
    end

    def method_of(receiver, name)
      kernel(:method, receiver, name.to_sym)
    rescue NameError
      MISSING
    end

    def value_fields(value)
      return [["Type", "BasicObject"], ["String form", "#<BasicObject>"]] unless Kernel === value

      klass = kernel(:class, value)
      fields = [["Type", module_call(:name, klass) || kernel(:to_s, klass)], ["String form", clip(form(value), 1000)]]
      fields << ["Length", value.length.to_s] if [String, Array, Hash].include?(klass)
      if Module === value
        fields << ["Ancestors", module_call(:ancestors, value).first(12).map { |m| module_call(:name, m) || "?" }.join(", ")]
      end
      fields
    end

    def form(value)
      return kernel(:to_s, value) unless plain?(value, 0, [0])

      Module === value ? (module_call(:name, value) || kernel(:to_s, value)) : value.inspect
    end

    # Whether value's own inspect runs no cell code: core data, and arrays and hashes of it.
    def plain?(value, depth, count)
      count[0] += 1
      return false if depth > 4 || count[0] > 2000
      return false unless Kernel === value

      klass = kernel(:class, value)
      return true if PLAIN.include?(klass) || klass.equal?(Class) || klass.equal?(Module)
      return value.all? { |item| plain?(item, depth + 1, count) } if klass.equal?(Array)
      return value.all? { |k, v| plain?(k, depth + 1, count) && plain?(v, depth + 1, count) } if klass.equal?(Hash)

      false
    end

    def method_fields(meth, detail, sources)
      file, line = meth.source_location
      lines = file && line ? source_lines(file, sources) : nil
      fields = [["Signature", signature(meth)], ["Owner", module_call(:name, meth.owner) || kernel(:to_s, meth.owner)]]
      fields << ["Defined at", cell_file?(file) ? "#{file} line #{line}" : "#{file}:#{line}"] if file
      doc = lines ? comments_above(lines, line) : nil
      fields << ["Docstring", doc || "<no docstring>"]
      fields << ["Source", definition(lines, line)] if detail == 1 && lines
      fields << ["Type", Method === meth ? "Method" : "UnboundMethod"]
      fields
    end

    def signature(meth)
      params = meth.parameters.map do |kind, name|
        label = name.to_s
        case kind
        when :req then label
        when :opt then "#{label} = ..."
        when :rest then "*#{label}"
        when :keyreq then "#{label}:"
        when :key then "#{label}: ..."
        when :keyrest then "**#{label}"
        when :block then "&#{label}"
        else label
        end
      end
      "#{meth.name}(#{params.join(', ')})"
    end

    # Whether file names a cell's source the runner keeps (`<cell-N>` or `<hidden-K>`).
    def cell_file?(file)
      file.start_with?("<cell-", "<hidden-")
    end

    def source_lines(file, sources)
      return sources[file]&.split("\n", -1) if cell_file?(file)
      return nil unless File.file?(file)

      File.readlines(file, chomp: true)
    rescue SystemCallError, IOError
      nil
    end

    def comments_above(lines, line)
      block = []
      index = line - 2
      while index >= 0 && lines[index] =~ /\A\s*#\s?(.*)\z/
        block.unshift(Regexp.last_match(1))
        index -= 1
      end
      block.empty? ? nil : block.join("\n")
    end

    # The definition starting at `line`: the fewest lines from it that parse as Ruby.
    def definition(lines, line)
      start = line - 1
      return nil if start.negative? || start >= lines.length

      (start...[lines.length, start + MAX_SOURCE_LINES].min).each do |stop|
        snippet = lines[start..stop].join("\n")
        return snippet if Ripper.sexp(snippet)
      end
      lines[start].to_s
    end

    def clip(text, limit)
      text.length <= limit ? text : "#{text[0, limit - 1]}…"
    end
  end
end
