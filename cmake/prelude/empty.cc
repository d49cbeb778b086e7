// The translation unit that carries a precompiled prelude (cmake/Prelude.cmake).
