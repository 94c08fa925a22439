-- Fixture of the golden tests (spec_golden_test.go): one of each outcome.
describe("outcomes", function()
  it("passes #fast", function()
    assert.are.equal(2, 1 + 1)
  end)

  it("fails an assertion", function()
    assert.are.same({ hp = 10, buffs = { "haste" } }, { hp = 10, buffs = { "slow" } })
  end)

  it("raises a string error #slow", function()
    local boss = nil
    return boss.hp
  end)

  it("raises a table error", function()
    error({ code = 42 })
  end)

  pending("is not written yet")

  describe("nested #slow", function()
    it("passes too", function()
      shield.sleep(1)
      assert.is_true(true)
    end)
  end)
end)
